"""``lbp``: loopy belief propagation (sum-product) with the Bethe estimate of log Z (no bound)."""
from .messages import Messages, message_fn, run_messages
from .solver import LoopyBP, message_options

__all__ = ["LoopyBP", "Messages", "message_fn", "run_messages", "message_options"]
