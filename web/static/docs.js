// The API reference page (GET /api/docs): Swagger UI rendering openapi.json of this same app.
// The key comes as ?code=KEY (function key) or ?subscription-key=KEY (API Management) on the first load;
// it is moved out of the URL into this tab's sessionStorage at once and sent only as a header.
(function () {
  "use strict";
  var params = new URLSearchParams(location.search);
  var stored = JSON.parse(sessionStorage.getItem("thematiq.docs.key") || "null");
  var key = stored;
  if (params.get("code")) key = { header: "x-functions-key", value: params.get("code"), scheme: "functionKey" };
  if (params.get("subscription-key")) {
    key = { header: "Ocp-Apim-Subscription-Key", value: params.get("subscription-key"), scheme: null };
  }
  if (key) sessionStorage.setItem("thematiq.docs.key", JSON.stringify(key));
  if (params.has("code") || params.has("subscription-key")) {
    params.delete("code");
    params.delete("subscription-key");
    var rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  // openapi.json next to this page: /api/openapi.json here, <gateway>/<api>/openapi.json behind API Management.
  var base = location.pathname.replace(/\/docs\/?$/, "");
  var ui = window.SwaggerUIBundle({
    url: base + "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    validatorUrl: null,
    // "Try it out" calls the API where this page is served (a gateway path too), whatever the document's servers say.
    responseInterceptor: function (res) {
      if (res.ok && res.url && /\/openapi\.json$/.test(res.url.split("?")[0])) {
        try {
          var doc = JSON.parse(res.text);
          doc.servers = [{ url: base, description: "this deployment" }];
          res.text = res.data = JSON.stringify(doc);
          res.body = res.obj = doc;
        } catch (e) { /* leave it as served */ }
      }
      return res;
    },
    requestInterceptor: function (req) {
      if (key && !req.headers[key.header]) req.headers[key.header] = key.value;
      return req;
    },
    onComplete: function () {
      if (key && key.scheme) ui.preauthorizeApiKey(key.scheme, key.value);
      document.title = "Thematiq API reference";
    },
  });
  window.thematiqDocs = ui;
})();
