from .loader import effective_plan, load_config, parse_config
from .schema import Config, ModelConfig, PlanConfig, RouteConfig, UpstreamConfig

__all__ = ["Config", "ModelConfig", "PlanConfig", "RouteConfig", "UpstreamConfig",
           "effective_plan", "load_config", "parse_config"]
