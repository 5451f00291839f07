from queueguard.cli import main

raise SystemExit(main())
