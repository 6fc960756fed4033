"""The algorithm core (`fedgdp.methods.base`), as a package."""
from .base import *  # noqa: F403
from .base import (  # noqa: F401
    CNN,
    REALDATA,
    SIMULATION,
    StepSettings,
    __all__,  # noqa: F401
    check_finite_release,
)
