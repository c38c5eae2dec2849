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
# THEMATIQ_SMOKE_PAUSE (seconds between tries, 15) and THEMATIQ_SMOKE_TRIES (override
# each check's number of tries) exist for tests/e2e/infra/test_postdeploy_hook.py.
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

# until_ok PATH PATTERN TRIES HINT: GET $THEMATIQ_API_URL/PATH through the gateway every 15 s until it answers
# 200 with a body matching PATTERN; after TRIES attempts print HINT and the last answer, and fail.
until_ok() {
  attempt=0
  while :; do
    attempt=$((attempt + 1))
    body=$(curl -sS --max-time 30 -w '\n%{http_code}' -H "Ocp-Apim-Subscription-Key: $key" "$THEMATIQ_API_URL/$1" || true)
    code=$(printf '%s' "$body" | tail -n 1)
    if [ "$code" = "200" ] && printf '%s' "$body" | grep -q "$2"; then
      echo "postdeploy: $THEMATIQ_API_URL/$1 -> 200 (attempt $attempt)"
      return 0
    fi
    if [ "$attempt" -ge "${THEMATIQ_SMOKE_TRIES:-$3}" ]; then
      echo "postdeploy: $THEMATIQ_API_URL/$1 did not answer 200 after $attempt attempts (last: $code)$4" >&2
      printf '%s\n' "$body" | head -n 5 >&2
      exit 1
    fi
    sleep "${THEMATIQ_SMOKE_PAUSE:-15}"
  done
}

# A fresh deployment takes a minute or two: role assignments, the auth settings
# and the first cold start. Retry for up to ~5 minutes.
until_ok health '"status": *"ok"' 20 ""

# The whole trust chain: APIM's token, App Service Authentication admitting only
# APIM's identity, the app matching the caller's object id, the tenant header.
# The smoke subscription's tenant ("smoke") has no jobs: an empty list is the answer.
until_ok 'jobs?limit=1' '"items"' 12 \
  ": is TRUSTED_GATEWAY_PRINCIPAL_ID APIM's identity, and App Service Authentication on? (docs/security.md)"

code=$(curl -sS --max-time 30 -o /dev/null -w '%{http_code}' "$THEMATIQ_FUNCTION_URL/jobs" || true)
if [ "$code" != "401" ]; then
  echo "postdeploy: a direct call to $THEMATIQ_FUNCTION_URL/jobs without a token got $code, expected 401" >&2
  exit 1
fi
echo "postdeploy: direct call without API Management's token -> 401, as it should"
