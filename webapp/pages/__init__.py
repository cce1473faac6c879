"""The pages of the web app, one module per page (Dash Pages): each holds its
``register_page`` call, its ``layout(**query)`` and its ``register_callbacks(app)``."""
