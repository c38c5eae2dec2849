// The function app on Flex Consumption (FC1), running as the user-assigned
// identity, with every app setting the code reads (shared/settings.py,
// source "app") set explicitly here: tests/infra/test_settings_agree.py checks it.
param location string
param tags object
param name string
param planName string
param identityResourceId string
param identityClientId string
param storageAccountName string
param deploymentContainerUrl string
param applicationInsightsConnectionString string
param maximumInstanceCount int
param instanceMemoryMB int

// Storage names (defaults = shared/settings.py defaults).
param jobsTable string = 'jobs'
param jobsQueue string = 'jobs'
param chunksQueue string = 'chunks'
param resultsContainer string = 'thematiq'
param llmCacheTable string = 'llmcache'

// LLM (defaults = shared/settings.py defaults). LLM_API_KEY is never set here:
// Azure OpenAI is reached with the managed identity. For an OpenAI-compatible
// endpoint that needs a key, add a Key Vault reference by hand (docs/deploy.md).
param llmProvider string = 'none'
param llmEndpoint string = ''
param llmDeployment string = ''
param llmEmbeddingsDeployment string = ''
param llmApiVersion string = '2024-10-21'

var storageSuffix = environment().suffixes.storage

// BEGIN app settings
var appSettings = {
  // Identity-based host storage: no connection string, no key.
  AzureWebJobsStorage__accountName: storageAccountName
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  AzureWebJobsStorage__blobServiceUri: 'https://${storageAccountName}.blob.${storageSuffix}'
  AzureWebJobsStorage__queueServiceUri: 'https://${storageAccountName}.queue.${storageSuffix}'
  AzureWebJobsStorage__tableServiceUri: 'https://${storageAccountName}.table.${storageSuffix}'
  JOBS_TABLE: jobsTable
  JOBS_QUEUE: jobsQueue
  CHUNKS_QUEUE: chunksQueue
  // The platform's test pipelines can hold a worker for minutes or kill their own process: not for tenants.
  DISABLED_PIPELINES: 'echo,sleep,fanout'
  MAX_CHUNKS_IN_FLIGHT_PER_JOB: '8'
  RESULTS_CONTAINER: resultsContainer
  // Empty on purpose: behind API Management the tenant header is required, and
  // a request without it is refused rather than filed under a default tenant.
  DEFAULT_TENANT: ''
  MAX_INPUT_BYTES: '26214400'
  HEARTBEAT_SECONDS: '15'
  HEARTBEAT_STALE_SECONDS: '120'
  QUEUED_STALE_SECONDS: '900'
  PROGRESS_MIN_INTERVAL_SECONDS: '3'
  CANCEL_GRACE_SECONDS: '10'
  REAPER_SCHEDULE: '0 */1 * * * *'
  RETENTION_DAYS: '30'
  PIPELINE_TIMEOUT_SECONDS: '1500'
  LLM_PROVIDER: llmProvider
  LLM_ENDPOINT: llmEndpoint
  LLM_DEPLOYMENT: llmDeployment
  LLM_API_VERSION: llmApiVersion
  LLM_EMBEDDINGS_DEPLOYMENT: llmEmbeddingsDeployment
  LLM_CACHE_TABLE: llmCacheTable
  LLM_TIMEOUT_SECONDS: '60'
  LLM_MAX_TOKENS_PER_JOB: '200000'
  // Application Insights with local auth disabled: the connection string only
  // names the target; ingestion is authorised with the identity's token.
  APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Authorization=AAD;ClientId=${identityClientId}'
}
// END app settings

module plan 'br/public:avm/res/web/serverfarm:0.5.0' = {
  name: 'flex-plan'
  params: {
    name: planName
    location: location
    tags: tags
    kind: 'functionapp'
    skuName: 'FC1'
    reserved: true
    zoneRedundant: false
  }
}

module site 'br/public:avm/res/web/site:0.23.1' = {
  name: 'function-app'
  params: {
    name: name
    location: location
    // azd finds the target of service "api" by this tag.
    tags: union(tags, { 'azd-service-name': 'api' })
    kind: 'functionapp,linux'
    serverFarmResourceId: plan.outputs.resourceId
    httpsOnly: true
    managedIdentities: {
      userAssignedResourceIds: [identityResourceId]
    }
    basicPublishingCredentialsPolicies: [
      { name: 'ftp', allow: false }
      { name: 'scm', allow: false }
    ]
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: deploymentContainerUrl
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityResourceId
          }
        }
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
    }
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
    }
    // Settings passed as plain properties (no storageAccountResourceId /
    // applicationInsightResourceId): the module would otherwise add its own
    // AzureWebJobsStorage/App Insights entries.
    configs: [
      {
        name: 'appsettings'
        properties: appSettings
      }
    ]
  }
}

// A host-level function key used only by API Management. No value is given, so
// the Functions runtime generates one; it never appears in the repo, the
// parameters or the deployment history. apim.bicep copies it into a secret
// named value with listKeys().
resource apimKey 'Microsoft.Web/sites/host/functionKeys@2024-04-01' = {
  name: '${name}/default/apim'
  properties: {
    name: 'apim'
  }
  dependsOn: [site]
}

output id string = site.outputs.resourceId
output name string = site.outputs.name
output defaultHostName string = site.outputs.defaultHostname
output apimKeyName string = apimKey.properties.name
