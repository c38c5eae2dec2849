// Log Analytics + workspace-based Application Insights, both with local
// (key-based) auth disabled: telemetry is accepted only with an Entra token, so
// the app's identity needs Monitoring Metrics Publisher on the component and
// the app sends APPLICATIONINSIGHTS_AUTHENTICATION_STRING=Authorization=AAD;ClientId=...
param location string
param tags object
param logAnalyticsName string
param applicationInsightsName string
param identityPrincipalId string

@description('Days of retention. 30 is the free retention included with ingestion.')
param retentionInDays int = 30

@description('Daily ingestion cap in GB (-1 = none). A runaway log loop then costs at most this much a day.')
param dailyQuotaGb int = 1

// Monitoring Metrics Publisher: the least role that lets an identity send
// telemetry to a component with local auth disabled.
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'

module logAnalytics 'br/public:avm/res/operational-insights/workspace:0.12.0' = {
  name: 'log-analytics'
  params: {
    name: logAnalyticsName
    location: location
    tags: tags
    dataRetention: retentionInDays
    dailyQuotaGb: dailyQuotaGb
    features: {
      disableLocalAuth: true
      enableLogAccessUsingOnlyResourcePermissions: true
    }
  }
}

module applicationInsights 'br/public:avm/res/insights/component:0.6.0' = {
  name: 'application-insights'
  params: {
    name: applicationInsightsName
    location: location
    tags: tags
    kind: 'web'
    applicationType: 'web'
    workspaceResourceId: logAnalytics.outputs.resourceId
    retentionInDays: 30
    disableLocalAuth: true
    roleAssignments: [
      {
        principalId: identityPrincipalId
        principalType: 'ServicePrincipal'
        roleDefinitionIdOrName: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
      }
    ]
  }
}

output applicationInsightsId string = applicationInsights.outputs.resourceId
output applicationInsightsName string = applicationInsights.outputs.name
// Not a secret: with local auth disabled the instrumentation key in it cannot
// be used to send telemetry without a token.
output applicationInsightsConnectionString string = applicationInsights.outputs.connectionString
output logAnalyticsId string = logAnalytics.outputs.resourceId
