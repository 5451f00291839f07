from django.db import migrations


def backfill(apps, schema_editor):
    Product = apps.get_model("catalog", "Product")
    for product in Product.objects.filter(sku=""):
        product.sku = f"SKU-{product.pk:06d}"
        product.save(update_fields=["sku"])


class Migration(migrations.Migration):
    dependencies = [("catalog", "0002_product_sku_stock")]
    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
