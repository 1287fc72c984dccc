"""The pages of the app, one script per page, run by pxp.app.router (never imported by other layers)."""
