// Optional network lock-down of the function app to the APIM gateway's static
// public IPs: defence in depth on top of App Service Authentication, which
// already refuses every caller but API Management's identity.
//
// Never a deny-all: main.bicep deploys this only for the classic tiers with
// static IPs, and if the list of addresses is empty anyway (a v2 tier, or an
// address not yet assigned) the default action stays Allow and no rule is
// written, rather than locking API Management out with `Deny` and no allow rule.
param functionAppName string
param apimPublicIps array

var restrict = !empty(apimPublicIps)

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: functionAppName
}

resource web 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: functionApp
  name: 'web'
  properties: {
    ipSecurityRestrictionsDefaultAction: restrict ? 'Deny' : 'Allow'
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

output restricted bool = restrict
