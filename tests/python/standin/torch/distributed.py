"""torch.distributed, initialized, this process rank 3; not initialized when the environment
says STANDIN_DISTRIBUTED=off (a process before init_process_group)."""

import os


def is_available():
    return True


def is_initialized():
    return os.environ.get("STANDIN_DISTRIBUTED") != "off"


def get_rank():
    return 3
