"""Settings from the environment (PXP_*) or a .env file; never holds API keys."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///pxp.db"


class Settings(BaseSettings):
    """pxp's own settings. API keys stay with the SDKs' environment variables."""

    model_config = SettingsConfigDict(env_prefix="PXP_", env_file=".env", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    n: int = 10
    k: int = 3
    machine: str = "simulated"
    checker: str = "lexical"
    base_url: str | None = None
    concurrency: int = 4


def get_settings() -> Settings:
    return Settings()
