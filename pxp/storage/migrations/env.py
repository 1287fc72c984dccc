"""Alembic environment: runs on the connection pxp.storage.store hands over (or the URL)."""

from alembic import context
from sqlalchemy import create_engine
from sqlmodel import SQLModel

import pxp.storage.scorekeeping  # (registers the scorekeeping tables)
import pxp.storage.tables  # noqa: F401  (registers the tables)
from pxp.storage.schema import made_on

config = context.config
target_metadata = SQLModel.metadata


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True,
                          compare_type=True, include_object=made_on(connection.dialect.name))
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True,
                          compare_type=True, include_object=made_on(conn.dialect.name))
        with context.begin_transaction():
            context.run_migrations()


run()
