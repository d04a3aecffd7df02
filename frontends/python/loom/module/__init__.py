"""mx.mod / mx.module: MXNet 1.x's Module API over Loom executors and update graphs."""
from .base_module import BaseModule, ModuleError, ModuleNameError
from .module import Module
from .bucketing_module import BucketingModule
from .sequential_module import SequentialModule
from .executor_group import DataParallelExecutorGroup

__all__ = ["BaseModule", "Module", "BucketingModule", "SequentialModule", "ModuleError",
           "ModuleNameError", "DataParallelExecutorGroup"]
