"""torch._C's out-of-memory observer hook (the stand-in keeps the observers)."""

_observers = []


def _cuda_attach_out_of_memory_observer(observer):
    _observers.append(observer)
