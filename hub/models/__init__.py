"""Models: the one-method ``ChatModel`` protocol, the litellm adapter, the embedded local
model (:mod:`.local`, the optional ``local`` extra) and fakes for tests (:mod:`.testing`).
"""

from scopehub.hub.models.base import ChatModel, ModelResponse, ToolCall, check_request_allowed
from scopehub.hub.models.litellm_model import LiteLLMModel, takes_cache_marks
from scopehub.hub.models.pricing import Price, price_call

__all__ = [
    "ChatModel",
    "LiteLLMModel",
    "ModelResponse",
    "Price",
    "ToolCall",
    "check_request_allowed",
    "price_call",
    "takes_cache_marks",
]
