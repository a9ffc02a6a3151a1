import sys

from kda2.bench import main

sys.exit(main())
