// Thematiq on Azure: Function App (Flex Consumption) + Storage (identity only) +
// Application Insights/Log Analytics (Entra auth only) + API Management in front.
// Deployed by `azd up` (see docs/deploy.md). Subscription scope so that azd can
// create the resource group; everything else lives in that group.
targetScope = 'subscription'

// ---------------------------------------------------------------------------
// azd conventions
// ---------------------------------------------------------------------------
@minLength(1)
@maxLength(40)
@description('azd environment name; used in resource names and the azd-env-name tag.')
param environmentName string

@minLength(1)
@description('Region for every resource. Must support Flex Consumption (az functionapp list-flexconsumption-locations).')
param location string

// ---------------------------------------------------------------------------
// Names (empty = derived from the environment name and a stable token)
// ---------------------------------------------------------------------------
param resourceGroupName string = ''
param functionAppName string = ''
param storageAccountName string = ''
param identityName string = ''
param logAnalyticsName string = ''
param applicationInsightsName string = ''
param apimName string = ''
param openAIName string = ''

// ---------------------------------------------------------------------------
// Function app sizing (Flex Consumption FC1)
// ---------------------------------------------------------------------------
// Flex Consumption refuses a maximumInstanceCount below 40 in most regions
// (a few allow less: docs/deploy.md, Scaling); 40 is also the floor here so that
// a first `azd up` cannot fail on it. Lower spend with host.json batch sizes and
// LLM_MAX_TOKENS_PER_JOB instead.
@minValue(40)
@maxValue(1000)
@description('Upper bound on instances the app scales out to; the main cost and blast-radius guard. At least 40.')
param maximumInstanceCount int = 40

@allowed([512, 2048, 4096])
@description('Memory of one instance. The pipeline runs in a child process (embeddings, clustering): 2048 is the floor that works.')
param instanceMemoryMB int = 2048

// ---------------------------------------------------------------------------
// Storage names the app uses (keep equal to shared/settings.py defaults)
// ---------------------------------------------------------------------------
param jobsTable string = 'jobs'
param jobsQueue string = 'jobs'
param resultsContainer string = 'thematiq'
param llmCacheTable string = 'llmcache'
// Per-tenant fairness (docs/architecture.md, "Per-tenant fairness"): one tenant's backlog may not hold back another
// tenant's first job. 10 is two hosts' worth of concurrent attempts (batchSize 4 + newBatchThreshold 1 each): a
// tenant alone still scales out to two instances, and another tenant's job is at most 10 messages behind.
param tenantMaxInFlight int = 10

// ---------------------------------------------------------------------------
// LLM
// ---------------------------------------------------------------------------
@allowed(['none', 'azure', 'openai'])
@description('LLM_PROVIDER. Forced to azure when deployOpenAI is true.')
param llmProvider string = 'none'

@description('LLM_ENDPOINT. Ignored when deployOpenAI is true (the new account\'s endpoint is used).')
param llmEndpoint string = ''

@description('LLM_DEPLOYMENT. Ignored when deployOpenAI is true (the new model deployment is used).')
param llmDeployment string = ''

@description('LLM_EMBEDDINGS_DEPLOYMENT; empty uses the embedded ONNX model.')
param llmEmbeddingsDeployment string = ''

param llmApiVersion string = '2024-10-21'

@description('Create an Azure OpenAI account with one chat model deployment, and grant the app identity Cognitive Services OpenAI User on it.')
param deployOpenAI bool = false
// Models are retired on a schedule: check that the pair is deployable in your
// region with GlobalStandard before `azd up` (docs/deploy.md, "Choosing the chat
// model"); set THEMATIQ_OPENAI_MODEL / THEMATIQ_OPENAI_MODEL_VERSION to change it.
@description('Chat model to deploy when deployOpenAI is true.')
param openAIModelName string = 'gpt-4.1-mini'
@description('Version of openAIModelName.')
param openAIModelVersion string = '2025-04-14'
@description('Thousands of tokens per minute for the model deployment.')
param openAIModelCapacity int = 10

// ---------------------------------------------------------------------------
// API Management
// ---------------------------------------------------------------------------
@allowed(['Consumption', 'Developer', 'Basic', 'Standard', 'Premium', 'BasicV2', 'StandardV2'])
param apimSku string = 'Consumption'
param apimPublisherEmail string = 'admin@example.com'
param apimPublisherName string = 'Thematiq'

@description('Tenants to onboard: one APIM subscription per tenant, named after the tenant (the name becomes the x-thematiq-tenant header).')
param tenants array = []

@description('Also deny direct calls to the function app by network, except from the APIM gateway IPs. Applied only on the classic tiers with static IPs; never a deny-all (infra/app/access.bicep).')
param restrictToApim bool = false

@description('Base URL clients use (PUBLIC_BASE_URL), for Location and links. Empty: the APIM gateway\'s default host + /thematiq. Set it for a custom domain.')
param publicBaseUrl string = ''

@description('Application (client) id of an existing Entra app registration for the API (the token audience). Empty: one is created (needs the right to register applications).')
param apiAppId string = ''

// ---------------------------------------------------------------------------
// Operators
// ---------------------------------------------------------------------------
@description('Object id of an operator (azd sets AZURE_PRINCIPAL_ID to the signed-in user) given data-plane read access to Storage. Empty: nobody.')
param principalId string = ''

@allowed(['User', 'Group', 'ServicePrincipal'])
param principalType string = 'User'

// ---------------------------------------------------------------------------
// Alerts
// ---------------------------------------------------------------------------
@description('E-mail for alert notifications; empty creates the alerts without an action group.')
param alertEmail string = ''

@description('Alert when the oldest queued job has waited longer than this.')
param oldestQueuedAlertMinutes int = 15

@secure()
@minLength(32) // an empty or short key would seal every tenant's secrets with a guessable key (the app refuses an empty one at run time too)
@description('WEBHOOK_SECRETS_KEY: seals the tenants\' webhook secrets at rest (infra/app/keyvault.bicep). Generate it once per environment.')
param webhookSecretsKey string

var abbrs = {
  rg: 'rg-'
  func: 'func-'
  plan: 'plan-'
  st: 'st'
  id: 'id-'
  log: 'log-'
  appi: 'appi-'
  apim: 'apim-'
  oai: 'oai-'
  kv: 'kv-'
}
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName, app: 'thematiq' }
var appName = !empty(functionAppName) ? functionAppName : '${abbrs.func}${resourceToken}'
var apimServiceName = !empty(apimName) ? apimName : '${abbrs.apim}${resourceToken}'
// Known before APIM exists (its default gateway host is <name>.azure-api.net in the public cloud), so the app
// can be told where clients reach it in the same deployment; the policy's X-Forwarded-* headers say the same.
var clientBaseUrl = !empty(publicBaseUrl) ? publicBaseUrl : 'https://${apimServiceName}.azure-api.net/thematiq'

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: !empty(resourceGroupName) ? resourceGroupName : '${abbrs.rg}${environmentName}'
  location: location
  tags: tags
}

// The one identity the app runs as. User-assigned so that role assignments can
// be made (and propagate) before the app first starts.
module identity 'br/public:avm/res/managed-identity/user-assigned-identity:0.4.1' = {
  scope: rg
  name: 'identity'
  params: {
    name: !empty(identityName) ? identityName : '${abbrs.id}${resourceToken}'
    location: location
    tags: tags
  }
}

// API Management's identity: the only caller App Service Authentication admits.
// User-assigned, so that its ids exist before both the app (which must know
// whom to trust) and APIM (which calls with it): no cycle, no second provision.
module apimIdentity 'br/public:avm/res/managed-identity/user-assigned-identity:0.4.1' = {
  scope: rg
  name: 'apim-identity'
  params: {
    name: '${abbrs.id}apim-${resourceToken}'
    location: location
    tags: tags
  }
}

// The API's app registration (the audience of APIM's token), unless one is given.
module entra 'app/entra.bicep' = if (empty(apiAppId)) {
  name: 'entra'
  params: {
    uniqueName: 'thematiq-api-${resourceToken}'
    displayName: 'Thematiq API (${environmentName})'
  }
}
var audience = !empty(apiAppId) ? apiAppId : entra!.outputs.appId

module monitoring 'app/monitoring.bicep' = {
  scope: rg
  name: 'monitoring'
  params: {
    location: location
    tags: tags
    logAnalyticsName: !empty(logAnalyticsName) ? logAnalyticsName : '${abbrs.log}${resourceToken}'
    applicationInsightsName: !empty(applicationInsightsName) ? applicationInsightsName : '${abbrs.appi}${resourceToken}'
    identityPrincipalId: identity.outputs.principalId
  }
}

module storage 'app/storage.bicep' = {
  scope: rg
  name: 'storage'
  params: {
    location: location
    tags: tags
    name: !empty(storageAccountName) ? storageAccountName : '${abbrs.st}${resourceToken}'
    identityPrincipalId: identity.outputs.principalId
    jobsTable: jobsTable
    jobsQueue: jobsQueue
    resultsContainer: resultsContainer
    llmCacheTable: llmCacheTable
    deploymentContainer: 'app-package-${take(appName, 32)}'
    operatorPrincipalId: principalId
    operatorPrincipalType: principalType
  }
}

module openai 'app/openai.bicep' = if (deployOpenAI) {
  scope: rg
  name: 'openai'
  params: {
    location: location
    tags: tags
    name: !empty(openAIName) ? openAIName : '${abbrs.oai}${resourceToken}'
    identityPrincipalId: identity.outputs.principalId
    modelName: openAIModelName
    modelVersion: openAIModelVersion
    capacity: openAIModelCapacity
  }
}

// The key that seals the tenants' webhook secrets in the table, readable by the app's identity only.
module vault 'app/keyvault.bicep' = {
  scope: rg
  name: 'keyvault'
  params: {
    location: location
    tags: tags
    name: '${abbrs.kv}${resourceToken}'
    identityPrincipalId: identity.outputs.principalId
    webhookSecretsKey: webhookSecretsKey
  }
}

module api 'app/api.bicep' = {
  scope: rg
  name: 'api'
  params: {
    webhookSecretsKeyUri: vault.outputs.webhookSecretsKeyUri
    location: location
    tags: tags
    name: appName
    planName: '${abbrs.plan}${resourceToken}'
    identityResourceId: identity.outputs.resourceId
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    deploymentContainerUrl: storage.outputs.deploymentContainerUrl
    applicationInsightsConnectionString: monitoring.outputs.applicationInsightsConnectionString
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    apiAppId: audience
    apimPrincipalId: apimIdentity.outputs.principalId
    apimClientId: apimIdentity.outputs.clientId
    publicBaseUrl: clientBaseUrl
    jobsTable: jobsTable
    jobsQueue: jobsQueue
    resultsContainer: resultsContainer
    llmCacheTable: llmCacheTable
    tenantMaxInFlight: tenantMaxInFlight
    llmProvider: deployOpenAI ? 'azure' : llmProvider
    llmEndpoint: deployOpenAI ? openai.outputs.endpoint : llmEndpoint
    llmDeployment: deployOpenAI ? openai.outputs.deploymentName : llmDeployment
    llmEmbeddingsDeployment: llmEmbeddingsDeployment
    llmApiVersion: llmApiVersion
  }
  // The host reads its keys and leases from Storage with the identity at first
  // start: the role assignments must exist before the app does.
  dependsOn: [storage, monitoring, vault]
}

module apim 'app/apim.bicep' = {
  scope: rg
  name: 'apim'
  params: {
    location: location
    tags: tags
    name: apimServiceName
    sku: apimSku
    publisherEmail: apimPublisherEmail
    publisherName: apimPublisherName
    functionAppHostName: api.outputs.defaultHostName
    identityResourceId: apimIdentity.outputs.resourceId
    identityClientId: apimIdentity.outputs.clientId
    apiAppId: audience
    tenants: tenants
  }
}

// Only the classic tiers have static outbound IPs; on Consumption and the v2
// tiers the list is empty or not the gateway's, and a Deny with no allow rule
// would lock APIM out. access.bicep also refuses to deny with an empty list.
var staticIpTiers = ['Developer', 'Basic', 'Standard', 'Premium']
module access 'app/access.bicep' = if (restrictToApim && contains(staticIpTiers, apimSku)) {
  scope: rg
  name: 'access'
  params: {
    functionAppName: api.outputs.name
    apimPublicIps: apim.outputs.publicIpAddresses
  }
}

module alerts 'app/alerts.bicep' = {
  scope: rg
  name: 'alerts'
  params: {
    location: location
    tags: tags
    namePrefix: environmentName
    applicationInsightsId: monitoring.outputs.applicationInsightsId
    storageAccountId: storage.outputs.id
    alertEmail: alertEmail
    oldestQueuedAlertMinutes: oldestQueuedAlertMinutes
  }
}

module workbook 'app/workbook.bicep' = {
  scope: rg
  name: 'workbook'
  params: {
    location: location
    tags: tags
    applicationInsightsId: monitoring.outputs.applicationInsightsId
  }
}

// azd reads these into the environment (.azure/<env>/.env). None is a secret.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = api.outputs.name
output AZURE_STORAGE_ACCOUNT_NAME string = storage.outputs.name
output AZURE_APIM_NAME string = apim.outputs.name
output THEMATIQ_API_URL string = apim.outputs.apiUrl
output THEMATIQ_FUNCTION_URL string = 'https://${api.outputs.defaultHostName}/api'
output THEMATIQ_API_APP_ID string = audience
output THEMATIQ_APIM_PRINCIPAL_ID string = apimIdentity.outputs.principalId
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.applicationInsightsName
