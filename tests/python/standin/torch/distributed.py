"""torch.distributed, initialized, this process rank 3."""


def is_available():
    return True


def is_initialized():
    return True


def get_rank():
    return 3
