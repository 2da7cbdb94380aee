"""``python -m kubectl_kvdtype`` runs the plugin as kubectl would."""

import sys

from kubectl_kvdtype._cli.main import main

sys.exit(main())
