"""pxp's own settings from the environment (PXP_*), typed and checked by their one declaration
(pxp.protocols.settings; docs/operations.md, Settings); never holds API keys.

Each attribute reads its one variable when asked, so a bad variable stops only what uses it."""

from __future__ import annotations

from pxp.protocols.settings import BY_NAME, value

DEFAULT_DATABASE_URL: str = BY_NAME["PXP_DATABASE_URL"].default


class Settings:
    """The environment's settings, each read (and checked) when asked."""

    @property
    def database_url(self) -> str:
        return str(value("PXP_DATABASE_URL"))

    @property
    def n(self) -> int:
        return int(value("PXP_N"))

    @property
    def k(self) -> int:
        return int(value("PXP_K"))

    @property
    def machine(self) -> str:
        return str(value("PXP_MACHINE"))

    @property
    def checker(self) -> str:
        return str(value("PXP_CHECKER"))

    @property
    def base_url(self) -> str | None:
        url = value("PXP_BASE_URL")
        return None if url is None else str(url)


def get_settings() -> Settings:
    return Settings()
