from django.db import models


class Order(models.Model):
    product = models.ForeignKey("catalog.Product", on_delete=models.CASCADE)
    quantity = models.IntegerField(default=1)
    note = models.TextField(null=True)
    status = models.CharField(max_length=20, default="new")
    placed = models.DateTimeField(null=True, db_index=True)
