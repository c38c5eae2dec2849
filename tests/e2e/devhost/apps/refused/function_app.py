"""An app Microsoft's runtime refuses to index: one function annotated ``-> None`` on an HTTP trigger.

One refused function fails the whole app's indexing (Azure then loads zero functions), so devhost must not start
and must print the runtime's reason (tests/e2e/devhost/test_devhost_worker.py).
"""

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="fine")
def fine(req: func.HttpRequest) -> str:
    return "fine"


@app.route(route="refused")
def refused(req: func.HttpRequest) -> None:
    return None
