// The function app on Flex Consumption (FC1), running as the user-assigned
// identity, with every app setting the code reads (shared/settings.py,
// source "app") set explicitly here: tests/unit/infra/test_settings_agree.py checks it.
param location string
param tags object
param name string
param planName string
param identityResourceId string
param identityClientId string
param storageAccountName string
param deploymentContainerUrl string
param applicationInsightsConnectionString string
@minValue(40)
@description('Flex Consumption rejects fewer than 40 instances in most regions (docs/deploy.md, Scaling).')
param maximumInstanceCount int
param instanceMemoryMB int

// Tenant trust (docs/security.md): API Management calls the app with its own
// user-assigned identity; App Service Authentication admits only that identity,
// and the app checks the principal id it reports. No function key anywhere.
@description('Application (client) id of the Entra app registration that stands for this API (the token audience).')
param apiAppId string
@description('Object (principal) id of API Management\'s user-assigned identity: the only caller admitted.')
param apimPrincipalId string
@description('Client id of API Management\'s user-assigned identity (the token\'s azp/appid).')
param apimClientId string
@description('PUBLIC_BASE_URL: where clients reach the API (the gateway), for Location and links.')
param publicBaseUrl string = ''
@description('Key Vault URI of WEBHOOK_SECRETS_KEY (keyvault.bicep), set as a Key Vault reference, never as a value.')
param webhookSecretsKeyUri string

// Storage names (defaults = shared/settings.py defaults).
param jobsTable string = 'jobs'
param jobsQueue string = 'jobs'
param chunksQueue string = 'chunks'
param resultsContainer string = 'thematiq'
param llmCacheTable string = 'llmcache'
@description('Per-tenant fairness window (TENANT_MAX_IN_FLIGHT): at most this many of one tenant\'s jobs queued or running; 0 turns it off.')
param tenantMaxInFlight int = 10

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
  // 'tenant' for the first deploy of the chunk partitions while the code before still runs, then 'job' (docs/scaling.md).
  CHUNK_ROWS: 'job'
  CALLBACKS_QUEUE: 'callbacks'
  // Never true in Azure: it lifts the SSRF checks of webhook URLs. WEBHOOK_SECRET is a Key Vault reference (docs/deploy.md).
  WEBHOOK_ALLOW_PRIVATE: 'false'
  RESULTS_CONTAINER: resultsContainer
  // Empty on purpose: behind API Management the tenant header is required, and
  // a request without it is refused rather than filed under a default tenant.
  DEFAULT_TENANT: ''
  // Only requests App Service Authentication vouches for as API Management may name a tenant.
  TRUSTED_GATEWAY_PRINCIPAL_ID: apimPrincipalId
  // No function key: App Service Authentication (below) is the gate, the app checks the caller.
  HTTP_AUTH_LEVEL: 'anonymous'
  // The gateway's URL (main.bicep); the policy's X-Forwarded-* headers say the same.
  PUBLIC_BASE_URL: publicBaseUrl
  MAX_INPUT_BYTES: '26214400'
  HEARTBEAT_SECONDS: '15'
  HEARTBEAT_STALE_SECONDS: '120'
  QUEUED_STALE_SECONDS: '900'
  PROGRESS_MIN_INTERVAL_SECONDS: '3'
  CANCEL_GRACE_SECONDS: '10'
  REAPER_SCHEDULE: '0 */5 * * * *'
  ATTEMPT_PROCESS: 'fork'
  // The Python runtime's pool for sync functions (every function here is sync, and an attempt holds its thread for
  // up to PIPELINE_TIMEOUT_SECONDS). Its default, min(32, vCPUs + 4), is 5 on a 1-vCPU instance: five job attempts
  // would take it all. 32 covers the three queue functions' 5 each and the two timers (17) with room for HTTP
  // (docs/architecture.md#the-thread-budget; tests/unit/infra/test_thread_budget.py).
  PYTHON_THREADPOOL_THREAD_COUNT: '32'
  INSTANCE_MEMORY_MB: '2048'
  MEMORY_MARGIN_MB: '512'
  DEFAULT_ATTEMPT_MEMORY_MB: '128'
  ADMISSION_DELAY_SECONDS: '5'
  RETENTION_DAYS: '30'
  PIPELINE_TIMEOUT_SECONDS: '1500'
  LLM_PROVIDER: llmProvider
  LLM_ENDPOINT: llmEndpoint
  LLM_DEPLOYMENT: llmDeployment
  LLM_API_VERSION: llmApiVersion
  LLM_EMBEDDINGS_DEPLOYMENT: llmEmbeddingsDeployment
  LLM_CACHE_TABLE: llmCacheTable
  LLM_TIMEOUT_SECONDS: '60'
  TENANT_MAX_IN_FLIGHT: string(tenantMaxInFlight)
  LLM_MAX_TOKENS_PER_JOB: '200000'
  // Application Insights with local auth disabled: the connection string only
  // names the target; ingestion is authorised with the identity's token.
  APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Authorization=AAD;ClientId=${identityClientId}'
}
// END app settings

// Secrets, as Key Vault references the platform resolves with the app's identity (never plain values).
var secretSettings = {
  WEBHOOK_SECRETS_KEY: '@Microsoft.KeyVault(SecretUri=${webhookSecretsKeyUri})'
}

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
    // Key Vault references are resolved with this identity (the app has no system-assigned one).
    keyVaultAccessIdentityResourceId: identityResourceId
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
        version: '3.13'
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
        properties: union(appSettings, secretSettings)
      }
    ]
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: name
}

// App Service Authentication ("Easy Auth"): every request but the health probe
// needs an Entra token for this API, issued to API Management's identity and
// nobody else (allowedPrincipals + allowedApplications). It also strips any
// client-sent X-MS-CLIENT-PRINCIPAL-* header and sets X-MS-CLIENT-PRINCIPAL-ID
// from the token, which is what the app compares with TRUSTED_GATEWAY_PRINCIPAL_ID.
// No secret: the token is validated against the directory's signing keys.
resource auth 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: functionApp
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'Return401'
      // Probes and the postdeploy smoke test; it reveals only the queue depth.
      excludedPaths: ['/api/health']
    }
    httpSettings: {
      requireHttps: true
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: apiAppId
          openIdIssuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
        }
        validation: {
          allowedAudiences: [apiAppId, 'api://${apiAppId}']
          defaultAuthorizationPolicy: {
            allowedPrincipals: {
              identities: [apimPrincipalId]
            }
            allowedApplications: [apimClientId]
          }
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
    }
  }
  dependsOn: [site]
}

output id string = site.outputs.resourceId
output name string = site.outputs.name
output defaultHostName string = site.outputs.defaultHostname
