from firmware_protocol.emulator.cli import main

raise SystemExit(main())
