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
@minValue(1)
@maxValue(1000)
@description('Upper bound on instances the app scales out to; the main cost and blast-radius guard.')
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
param openAIModelName string = 'gpt-4o-mini'
param openAIModelVersion string = '2024-07-18'
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

@description('Deny direct calls to the function app except from the APIM gateway IPs. Only possible on tiers with static IPs (not Consumption).')
param restrictToApim bool = false

// ---------------------------------------------------------------------------
// Alerts
// ---------------------------------------------------------------------------
@description('E-mail for alert notifications; empty creates the alerts without an action group.')
param alertEmail string = ''

@description('Alert when the oldest queued job has waited longer than this.')
param oldestQueuedAlertMinutes int = 15

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
}
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName, app: 'thematiq' }
var appName = !empty(functionAppName) ? functionAppName : '${abbrs.func}${resourceToken}'

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

module api 'app/api.bicep' = {
  scope: rg
  name: 'api'
  params: {
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
    jobsTable: jobsTable
    jobsQueue: jobsQueue
    resultsContainer: resultsContainer
    llmCacheTable: llmCacheTable
    llmProvider: deployOpenAI ? 'azure' : llmProvider
    llmEndpoint: deployOpenAI ? openai.outputs.endpoint : llmEndpoint
    llmDeployment: deployOpenAI ? openai.outputs.deploymentName : llmDeployment
    llmEmbeddingsDeployment: llmEmbeddingsDeployment
    llmApiVersion: llmApiVersion
  }
  // The host reads its keys and leases from Storage with the identity at first
  // start: the role assignments must exist before the app does.
  dependsOn: [storage, monitoring]
}

module apim 'app/apim.bicep' = {
  scope: rg
  name: 'apim'
  params: {
    location: location
    tags: tags
    name: !empty(apimName) ? apimName : '${abbrs.apim}${resourceToken}'
    sku: apimSku
    publisherEmail: apimPublisherEmail
    publisherName: apimPublisherName
    functionAppName: api.outputs.name
    functionAppHostName: api.outputs.defaultHostName
    tenants: tenants
  }
}

module access 'app/access.bicep' = if (restrictToApim && apimSku != 'Consumption') {
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
output APPLICATIONINSIGHTS_NAME string = monitoring.outputs.applicationInsightsName
