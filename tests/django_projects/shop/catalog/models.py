from django.db import models


class Category(models.Model):
    name = models.CharField(max_length=100, unique=True)


class Product(models.Model):
    name = models.CharField(max_length=200)
    category = models.ForeignKey(Category, on_delete=models.PROTECT)
    price = models.IntegerField()
    sku = models.CharField(max_length=40, default="")
    stock = models.IntegerField(default=0)
    weight = models.IntegerField(null=True)

    class Meta:
        indexes = [models.Index(fields=["sku"], name="product_sku_idx")]
        constraints = [models.CheckConstraint(condition=models.Q(price__gte=0), name="price_not_negative")]
