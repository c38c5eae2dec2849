// Optional Azure OpenAI account (deployOpenAI = true) with one chat model
// deployment. Local (key) auth is disabled; the app identity gets Cognitive
// Services OpenAI User, the least role that can call inference.
param location string
param tags object
param name string
param identityPrincipalId string
param modelName string
param modelVersion string
param capacity int
param deploymentName string = modelName

var cognitiveServicesOpenAIUser = '5e0bd9bd-7b93-4f28-af87-19fc36ad61bd'

module account 'br/public:avm/res/cognitive-services/account:0.13.0' = {
  name: 'openai-account'
  params: {
    name: name
    location: location
    tags: tags
    kind: 'OpenAI'
    sku: 'S0'
    customSubDomainName: name
    disableLocalAuth: true
    publicNetworkAccess: 'Enabled'
    deployments: [
      {
        name: deploymentName
        model: {
          format: 'OpenAI'
          name: modelName
          version: modelVersion
        }
        sku: {
          name: 'GlobalStandard'
          capacity: capacity
        }
      }
    ]
    roleAssignments: [
      {
        principalId: identityPrincipalId
        principalType: 'ServicePrincipal'
        roleDefinitionIdOrName: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', cognitiveServicesOpenAIUser)
      }
    ]
  }
}

output endpoint string = account.outputs.endpoint
output deploymentName string = deploymentName
