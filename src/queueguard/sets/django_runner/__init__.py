"""queueguard's runner inside a Django project: run by path (`python .../django_runner`),
never imported by queueguard (`sets.django_process` starts it)."""
