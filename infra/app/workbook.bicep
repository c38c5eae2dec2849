// Azure Monitor workbook "Thematiq jobs" (infra/app/workbook.json): jobs by
// status, durations, slowest stages, poison, oldest queued, stuck jobs.
param location string
param tags object
param applicationInsightsId string

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // Workbook names must be GUIDs; stable per resource group.
  name: guid(resourceGroup().id, 'thematiq-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'Thematiq jobs'
    category: 'workbook'
    sourceId: applicationInsightsId
    serializedData: loadTextContent('workbook.json')
  }
}
