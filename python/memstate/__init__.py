"""memstate's Python side: `memstate.torch.Recorder` writes a PyTorch training loop's allocator
state every N steps for `memstate import` and `memstate import --follow`; the `memstate` command
itself is the Rust binary installed beside this package."""

__all__ = ["torch"]
