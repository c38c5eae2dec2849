"""One Functions blueprint per trigger kind; ``function_app.py`` registers them."""
