"""The runtime protocol this code speaks.

Hosts announce it in `application_name` (`queueguard/<protocol> host=<id>`) and check it
against the database's `runtime_protocol` window at start-up and in every queue load.
"""

PROTOCOL = 4
