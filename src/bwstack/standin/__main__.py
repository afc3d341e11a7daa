"""``python3 -m bwstack.standin <launch_server argv>``: run the CPU stand-in for the SGLang server."""

from bwstack.standin.server import main

raise SystemExit(main())
