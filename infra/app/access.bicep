// Optional network lock-down of the function app to the APIM gateway's static
// public IPs. Only deployed when restrictToApim is true and the APIM tier has
// static IPs (not Consumption: its outbound addresses are shared and change).
// The function key, known only to APIM, is the primary control either way.
param functionAppName string
param apimPublicIps array

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource web 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: functionApp
  name: 'web'
  properties: {
    ipSecurityRestrictionsDefaultAction: 'Deny'
    ipSecurityRestrictions: [
      for (ip, i) in apimPublicIps: {
        name: 'apim-${i}'
        action: 'Allow'
        priority: 100 + i
        ipAddress: '${ip}/32'
      }
    ]
    // Deployments (azd deploy) go to the scm site: keep it reachable.
    scmIpSecurityRestrictionsUseMain: false
  }
}
