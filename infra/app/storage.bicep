// The one storage account: Functions host storage (AzureWebJobsStorage), the
// jobs table/queue/container, the LLM cache table and the Flex Consumption
// deployment package container. Shared keys are disabled: every caller uses
// Entra ID (the app's user-assigned identity; `azd deploy` publishes through
// the app's deployment endpoint, which writes the package with that identity).
param location string
param tags object
param name string
param identityPrincipalId string
param jobsTable string
param jobsQueue string
param chunksQueue string = 'chunks'
param resultsContainer string
param llmCacheTable string
param deploymentContainer string
@description('An operator (user or group) to give data-plane read access: blobs, queues, tables. Empty: nobody.')
param operatorPrincipalId string = ''
@allowed(['User', 'Group', 'ServicePrincipal'])
param operatorPrincipalType string = 'User'

// Role choice, least that works for identity-based AzureWebJobsStorage:
// - Storage Blob Data Owner: the Functions host (not our code) needs it. With an
//   identity-based AzureWebJobsStorage the host creates its own containers
//   (azure-webjobs-hosts for timer/singleton blob leases and the listener lock,
//   azure-webjobs-secrets for function keys), takes and renews blob leases and
//   writes the Flex deployment package; Microsoft's "Connecting to host storage
//   with an identity" table lists Storage Blob Data Owner as the minimum for
//   "no extension (host only)" and for the timer trigger. Blob Data Contributor
//   is not enough for the host's container management. Our own code (results,
//   checkpoints) would be satisfied by Contributor.
// - Storage Queue Data Contributor: the queue trigger reads/deletes messages and
//   moves failures to <queue>-poison; the API enqueues; the reaper re-enqueues.
//   (Reader + Message Processor would do for the trigger alone, not for sending.)
// - Storage Table Data Contributor: job entities, idempotency rows, LLM cache,
//   and the host's diagnostic events table.
// No Storage Account Contributor: that role is needed only by the blob
// trigger, which this app does not use, and it would allow listKeys.
var roles = {
  blobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  queueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  tableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
}
// Operators read (never write) what the app stores, with their own Entra
// identity: there are no account keys to hand out (shared keys are disabled).
var readerRoles = {
  blobDataReader: '2a2b9908-6ea1-4ae2-8e65-a410df84e7d1'
  queueDataReader: '19e7f393-937e-4f77-808e-94535e297925'
  tableDataReader: '76199698-9eea-4c19-bc75-cec21354c6b6'
}
var appAssignments = [
  for role in items(roles): {
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionIdOrName: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role.value)
  }
]
var operatorAssignments = [
  for role in items(readerRoles): {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionIdOrName: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role.value)
  }
]

module account 'br/public:avm/res/storage/storage-account:0.32.1' = {
  name: 'storage-account'
  params: {
    name: name
    location: location
    tags: tags
    kind: 'StorageV2'
    skuName: 'Standard_LRS'
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    defaultToOAuthAuthentication: true
    allowCrossTenantReplication: false
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
    blobServices: {
      containers: [
        { name: resultsContainer, publicAccess: 'None' }
        { name: deploymentContainer, publicAccess: 'None' }
      ]
    }
    queueServices: {
      queues: [
        { name: jobsQueue }
        // Created up front so the poison alert has something to watch from day one.
        { name: '${jobsQueue}-poison' }
        // Map-stage chunks (fan-out) have a queue and a poison queue of their own.
        { name: chunksQueue }
        { name: '${chunksQueue}-poison' }
        // Completion webhooks (docs/webhooks.md); dead letters are copied to -poison.
        { name: 'callbacks' }
        { name: 'callbacks-poison' }
      ]
    }
    tableServices: {
      tables: [
        { name: jobsTable }
        { name: llmCacheTable }
      ]
    }
    roleAssignments: empty(operatorPrincipalId) ? appAssignments : concat(appAssignments, operatorAssignments)
  }
}

output id string = account.outputs.resourceId
output name string = account.outputs.name
output deploymentContainerUrl string = '${account.outputs.primaryBlobEndpoint}${deploymentContainer}'
