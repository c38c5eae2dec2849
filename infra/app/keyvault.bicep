// The vault that holds WEBHOOK_SECRETS_KEY, the key that seals the tenants' webhook signing secrets in the
// jobs table (shared/storage/sealed.py). RBAC only, no access policies: the app's identity may read secrets
// (Key Vault Secrets User), nobody else gets a role here. The app reads the key through an App Service Key
// Vault reference (@Microsoft.KeyVault(SecretUri=...)), resolved by the platform with that identity: no SDK,
// and the key never appears in the template's outputs or in an app setting's value.
param location string
param tags object
param name string
@description('Principal id of the app\'s user-assigned identity.')
param identityPrincipalId string
@secure()
@minLength(32) // an empty or short key would seal every tenant's secrets with a guessable key (the app refuses an empty one at run time too)
@description('The key\'s value (e.g. 32 random bytes, base64), generated once per environment: azd env set WEBHOOK_SECRETS_KEY "$(openssl rand -base64 32)". Changing it makes stored secrets unreadable unless the old one is set as WEBHOOK_SECRETS_KEY_PREVIOUS.')
param webhookSecretsKey string

var secretsUserRole = '4633458b-17de-408a-b874-0445c86b69e6' // Key Vault Secrets User

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    enablePurgeProtection: true
    publicNetworkAccess: 'Enabled'
  }
}

resource key 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'webhook-secrets-key'
  properties: {
    value: webhookSecretsKey
    contentType: 'text/plain'
  }
}

resource appReadsSecrets 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  scope: vault
  name: guid(vault.id, identityPrincipalId, secretsUserRole)
  properties: {
    principalId: identityPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', secretsUserRole)
  }
}

// The secret's URI without a version: App Service follows the latest version (refreshed within 24 h, or on restart).
output webhookSecretsKeyUri string = '${vault.properties.vaultUri}secrets/${key.name}'
output name string = vault.name
