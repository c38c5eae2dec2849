"""Composition root: builds the Functions app and registers one blueprint per trigger module."""

from __future__ import annotations

import azure.functions as func

from blueprints import api, chunks, docs, reaper, ui, webhooks, worker
from shared.observability import telemetry

telemetry.configure()
app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)
app.register_functions(api.bp)
app.register_functions(worker.bp)
app.register_functions(chunks.bp)
app.register_functions(reaper.bp)
app.register_functions(ui.bp)
app.register_functions(docs.bp)
app.register_functions(webhooks.bp)
