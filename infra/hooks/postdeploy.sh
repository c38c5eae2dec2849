#!/bin/sh
# azd postdeploy hook: smoke-test the deployment through API Management.
#
# 1. GET /health through the gateway, with the "smoke" subscription, until it
#    answers 200 {"status":"ok"}: APIM -> app -> Storage.
# 2. GET /jobs through the gateway (the smoke tenant's empty list): APIM's token
#    -> App Service Authentication -> the app's principal check -> the tenant.
# 3. GET /jobs on the function app directly, without a token: must be 401
#    (App Service Authentication is on; a function key would not help either).
#
# Needs: az (logged in, as azd is), curl. Reads the azd environment that azd
# exports to hooks: AZURE_SUBSCRIPTION_ID, AZURE_RESOURCE_GROUP, AZURE_APIM_NAME,
# THEMATIQ_API_URL, THEMATIQ_FUNCTION_URL. Set THEMATIQ_SKIP_SMOKE=1 to skip.
set -eu

if [ "${THEMATIQ_SKIP_SMOKE:-}" = "1" ]; then
  echo "postdeploy: smoke test skipped (THEMATIQ_SKIP_SMOKE=1)"
  exit 0
fi
: "${AZURE_SUBSCRIPTION_ID:?}" "${AZURE_RESOURCE_GROUP:?}" "${AZURE_APIM_NAME:?}"
: "${THEMATIQ_API_URL:?}" "${THEMATIQ_FUNCTION_URL:?}"

secrets_url="https://management.azure.com/subscriptions/${AZURE_SUBSCRIPTION_ID}/resourceGroups/${AZURE_RESOURCE_GROUP}/providers/Microsoft.ApiManagement/service/${AZURE_APIM_NAME}/subscriptions/smoke/listSecrets?api-version=2024-05-01"
key=$(az rest --method post --url "$secrets_url" --query primaryKey -o tsv)
[ -n "$key" ] || { echo "postdeploy: could not read the smoke subscription's key" >&2; exit 1; }

# A fresh deployment takes a minute or two: role assignments, the auth settings
# and the first cold start. Retry for up to ~5 minutes.
attempt=0
while :; do
  attempt=$((attempt + 1))
  body=$(curl -sS --max-time 30 -w '\n%{http_code}' -H "Ocp-Apim-Subscription-Key: $key" "$THEMATIQ_API_URL/health" || true)
  code=$(printf '%s' "$body" | tail -n 1)
  if [ "$code" = "200" ] && printf '%s' "$body" | grep -q '"status": *"ok"'; then
    echo "postdeploy: $THEMATIQ_API_URL/health -> 200 ok (attempt $attempt)"
    break
  fi
  if [ "$attempt" -ge 20 ]; then
    echo "postdeploy: $THEMATIQ_API_URL/health did not answer 200 ok after $attempt attempts (last: $code)" >&2
    printf '%s\n' "$body" | head -n 5 >&2
    exit 1
  fi
  sleep 15
done

# The whole trust chain: APIM's token, App Service Authentication admitting only
# APIM's identity, the app matching X-MS-CLIENT-PRINCIPAL-ID, the tenant header.
# The smoke subscription's tenant ("smoke") has no jobs: an empty list is the answer.
attempt=0
while :; do
  attempt=$((attempt + 1))
  body=$(curl -sS --max-time 30 -w '\n%{http_code}' -H "Ocp-Apim-Subscription-Key: $key" "$THEMATIQ_API_URL/jobs?limit=1" || true)
  code=$(printf '%s' "$body" | tail -n 1)
  if [ "$code" = "200" ] && printf '%s' "$body" | grep -q '"items"'; then
    echo "postdeploy: $THEMATIQ_API_URL/jobs -> 200 through API Management's identity (attempt $attempt)"
    break
  fi
  if [ "$attempt" -ge 12 ]; then
    echo "postdeploy: $THEMATIQ_API_URL/jobs did not answer 200 (last: $code): is TRUSTED_GATEWAY_PRINCIPAL_ID APIM's identity, and App Service Authentication on? (docs/security.md)" >&2
    printf '%s\n' "$body" | head -n 5 >&2
    exit 1
  fi
  sleep 15
done

code=$(curl -sS --max-time 30 -o /dev/null -w '%{http_code}' "$THEMATIQ_FUNCTION_URL/jobs" || true)
if [ "$code" != "401" ]; then
  echo "postdeploy: a direct call to $THEMATIQ_FUNCTION_URL/jobs without a token got $code, expected 401" >&2
  exit 1
fi
echo "postdeploy: direct call without API Management's token -> 401, as it should"
