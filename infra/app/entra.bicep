// The Entra app registration that stands for the Thematiq API: the audience of
// the token API Management gets with its managed identity, and the client id
// App Service Authentication validates against. It has no secret, no
// credential, no redirect URI and no scope: nobody signs in to it, and the only
// principal admitted is API Management's identity (api.bicep authsettingsV2).
//
// Created with the Microsoft Graph Bicep extension (bicepconfig.json), which
// needs the deployer to be allowed to create applications (Application
// Developer, or the default "users can register applications"). Where that is
// not allowed, have an administrator create it once and pass its client id as
// `apiAppId` (docs/deploy.md); main.bicep then skips this module.
extension microsoftGraphV1

param uniqueName string
param displayName string

resource app 'Microsoft.Graph/applications@v1.0' = {
  uniqueName: uniqueName
  displayName: displayName
  signInAudience: 'AzureADMyOrg'
  api: {
    // v2 tokens: issuer https://login.microsoftonline.com/<tenant>/v2.0, audience = the app id.
    requestedAccessTokenVersion: 2
  }
}

// A token can only be issued for an application that has a service principal in the tenant.
resource sp 'Microsoft.Graph/servicePrincipals@v1.0' = {
  appId: app.appId
}

output appId string = app.appId
