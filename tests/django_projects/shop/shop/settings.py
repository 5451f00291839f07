"""A small shop: two apps with foreign keys, indexes, unique and check constraints, a
RunPython backfill, an `atomic = False` migration with a concurrent index, and a squash.
DATABASES is read from the environment, as many projects do; queueguard replaces its
connection fields."""
import os

SECRET_KEY = "test-only"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "catalog", "orders"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("SHOP_DB_NAME", "shop"),
        "HOST": os.environ.get("SHOP_DB_HOST", "db.invalid"),
        "PORT": os.environ.get("SHOP_DB_PORT", "5432"),
        "USER": os.environ.get("SHOP_DB_USER", "shop"),
        "PASSWORD": "shop",
        "OPTIONS": {"connect_timeout": 5},
    },
    "reporting": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "reporting",
        "HOST": "reporting.invalid",
    },
}
