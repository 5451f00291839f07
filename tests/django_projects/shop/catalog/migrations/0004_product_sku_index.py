from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("catalog", "0003_backfill_sku")]
    operations = [
        AddIndexConcurrently("product", models.Index(fields=["sku"], name="product_sku_idx")),
    ]
