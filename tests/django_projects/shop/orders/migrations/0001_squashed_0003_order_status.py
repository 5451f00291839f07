import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    replaces = [("orders", "0001_initial"), ("orders", "0002_order_note"), ("orders", "0003_order_status")]
    initial = True
    dependencies = [("catalog", "0001_initial")]
    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("quantity", models.IntegerField(default=1)),
                ("product", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to="catalog.product")),
                ("note", models.TextField(null=True)),
                ("placed", models.DateTimeField(db_index=True, null=True)),
                ("status", models.CharField(default="new", max_length=20)),
            ],
        ),
    ]
