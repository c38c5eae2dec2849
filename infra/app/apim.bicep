// API Management in front of the function app.
//
// Callers hold an APIM subscription key (one subscription per tenant, named
// after the tenant). The API policy (infra/apim/policy.xml) throws away any
// client-sent tenant, key, token or forwarded header, sets the tenant from the
// subscription, rate limits per subscription, and calls the app with a token
// for the API's app registration, obtained with APIM's user-assigned identity
// (authentication-managed-identity). Keyless: there is no function key to
// create, read (listKeys) or rotate, so the first `azd up` does not depend on
// the Functions host being up and able to write its key store
// (Azure/azure-functions-host#11379). See docs/security.md.
//
// The service itself is a plain resource rather than
// br/public:avm/res/api-management/service: that module defaults to
// zone-redundant Premium.
param location string
param tags object
param name string
@allowed(['Consumption', 'Developer', 'Basic', 'Standard', 'Premium', 'BasicV2', 'StandardV2'])
param sku string = 'Consumption'
param publisherEmail string
param publisherName string
param functionAppHostName string
@description('Resource id of the user-assigned identity APIM calls the app with.')
param identityResourceId string
@description('Client id of that identity (the policy names it).')
param identityClientId string
@description('Application (client) id of the API\'s app registration: the token audience.')
param apiAppId string
@description('Tenant ids; one APIM subscription each. Must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ (shared/constants.py TENANT_RE).')
param tenants array = []

var apiPath = 'thematiq'
var policyFile = loadTextContent('../apim/policy.xml')
// rate-limit-by-key is not available on the Consumption tier; there the same
// limit (the key IS the subscription) is expressed with rate-limit, which counts
// per subscription. The test checks that this exact element is in policy.xml.
var rateLimitByKey = '<rate-limit-by-key calls="120" renewal-period="60" counter-key="@(context.Subscription.Id)" />'
var rateLimitPerSubscription = '<rate-limit calls="120" renewal-period="60" />'
var policyRated = sku == 'Consumption' ? replace(policyFile, rateLimitByKey, rateLimitPerSubscription) : policyFile
// The identity and the audience are filled in here: client-id takes no policy expression.
var policyXml = replace(replace(policyRated, '__APIM_IDENTITY_CLIENT_ID__', identityClientId), '__API_APP_ID__', apiAppId)

resource service 'Microsoft.ApiManagement/service@2024-05-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: sku
    capacity: sku == 'Consumption' ? 0 : 1
  }
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityResourceId}': {}
    }
  }
  properties: {
    publisherEmail: publisherEmail
    publisherName: publisherName
  }
}

resource api 'Microsoft.ApiManagement/service/apis@2024-05-01' = {
  parent: service
  name: 'thematiq'
  properties: {
    displayName: 'Thematiq'
    description: 'Long-running thematic analysis jobs.'
    path: apiPath
    protocols: ['https']
    subscriptionRequired: true
    subscriptionKeyParameterNames: {
      header: 'Ocp-Apim-Subscription-Key'
      query: 'subscription-key'
    }
    format: 'openapi+json'
    // Placeholder until the app's GET /api/openapi.json is exported into this
    // file (docs/deploy.md, "Regenerating the OpenAPI document").
    value: loadTextContent('../apim/openapi.json')
    serviceUrl: 'https://${functionAppHostName}/api'
  }
}

resource apiPolicy 'Microsoft.ApiManagement/service/apis/policies@2024-05-01' = {
  parent: api
  name: 'policy'
  properties: {
    format: 'rawxml'
    value: policyXml
  }
}

// The dashboard (blueprints/ui.py) is one HTML page, not part of the OpenAPI
// document: an operation of its own so that /thematiq/ui reaches the app.
resource uiOperation 'Microsoft.ApiManagement/service/apis/operations@2024-05-01' = {
  parent: api
  name: 'ui'
  properties: {
    displayName: 'Dashboard'
    method: 'GET'
    urlTemplate: '/ui'
    description: 'The web dashboard (docs/dashboard.md). Open it with ?subscription-key=<key>.'
  }
}

resource product 'Microsoft.ApiManagement/service/products@2024-05-01' = {
  parent: service
  name: 'thematiq'
  properties: {
    displayName: 'Thematiq'
    description: 'One subscription per tenant; the subscription name is the tenant id.'
    subscriptionRequired: true
    approvalRequired: true
    state: 'published'
  }
}

resource productApi 'Microsoft.ApiManagement/service/products/apis@2024-05-01' = {
  parent: product
  name: api.name
}

resource tenantSubscriptions 'Microsoft.ApiManagement/service/subscriptions@2024-05-01' = [
  for tenant in tenants: {
    parent: service
    name: tenant
    properties: {
      displayName: tenant
      scope: product.id
      state: 'active'
    }
  }
]

// The postdeploy hook's smoke test (infra/hooks/postdeploy.sh) calls GET /health
// and GET /jobs (tenant "smoke", always empty) with this subscription; the
// policy lets it call nothing else.
resource smokeSubscription 'Microsoft.ApiManagement/service/subscriptions@2024-05-01' = {
  parent: service
  name: 'smoke'
  properties: {
    displayName: 'smoke (GET /health and GET /jobs only)'
    scope: api.id
    state: 'active'
  }
}

output name string = service.name
output gatewayUrl string = service.properties.gatewayUrl
output apiUrl string = '${service.properties.gatewayUrl}/${apiPath}'
// Empty on Consumption (no static IPs).
output publicIpAddresses array = service.properties.?publicIPAddresses ?? []
