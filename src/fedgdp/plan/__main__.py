"""``python -m fedgdp.plan shrink-png SRC DST``: a gallery PNG (rule gallery)."""
import sys

from .gallery import main

sys.exit(main())
