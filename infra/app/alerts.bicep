// Alerts that say "look now":
//  1. the poison queue is not empty (a job failed maxDequeueCount deliveries);
//  2. the oldest queued job is older than N minutes (custom metric emitted by
//     the app: thematiq.queue.oldest_age_seconds, see docs/operations.md);
//  3. function failure rate above a threshold (App Insights requests).
// Log alerts run against Application Insights (customMetrics / requests /
// traces) so they need no extra Storage diagnostics.
param location string
param tags object
param namePrefix string
param applicationInsightsId string
param storageAccountId string
param alertEmail string = ''
param poisonQueueName string = 'jobs-poison'
param oldestQueuedAlertMinutes int = 15
@description('Alert when more than this percentage of function executions fail in 15 minutes.')
param failureRatePercent int = 10

var actionGroups = empty(alertEmail) ? [] : [actionGroup.id]

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: 'ag-${namePrefix}-thematiq'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'thematiq'
    enabled: true
    emailReceivers: [
      {
        name: 'oncall'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

// 1. Poison queue length > 0. Queue message counts are a platform metric of the
//    storage account's queue service, but not per queue, so the app reports the
//    per-queue depth (thematiq.queue.poison_depth) and this alert reads it. The
//    storage-level QueueMessageCount is kept as a second, coarser signal in the
//    workbook.
resource poisonAlert 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: 'alert-${namePrefix}-poison-queue'
  location: location
  tags: tags
  properties: {
    displayName: 'Thematiq: poison queue not empty'
    description: 'A job message failed every delivery and was moved to ${poisonQueueName}. Inspect it (docs/operations.md, "Poison messages"), fix, and re-enqueue or delete.'
    severity: 1
    enabled: true
    scopes: [applicationInsightsId]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "thematiq.queue.poison_depth" | summarize depth = max(valueMax) by bin(timestamp, 5m)'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'depth'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    autoMitigate: true
    actions: { actionGroups: actionGroups }
  }
}

// 2. Oldest queued job older than N minutes: the queue is not being drained
//    (scale limit reached, trigger stopped, host crash-looping).
resource oldestQueuedAlert 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: 'alert-${namePrefix}-oldest-queued'
  location: location
  tags: tags
  properties: {
    displayName: 'Thematiq: oldest queued job older than ${oldestQueuedAlertMinutes} min'
    description: 'Jobs are waiting. Check instance count vs maximumInstanceCount, host errors, and the worker (docs/operations.md, "Stuck jobs").'
    severity: 2
    enabled: true
    scopes: [applicationInsightsId]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: 'customMetrics | where name == "thematiq.queue.oldest_age_seconds" | summarize age = max(valueMax) by bin(timestamp, 5m)'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'age'
          operator: 'GreaterThan'
          threshold: oldestQueuedAlertMinutes * 60
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    autoMitigate: true
    actions: { actionGroups: actionGroups }
  }
}

// 3. Function failure rate (all triggers: HTTP, queue, timer). 4xx answers are
//    successes for the host; only unhandled exceptions and 5xx count.
resource failureRateAlert 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: 'alert-${namePrefix}-failure-rate'
  location: location
  tags: tags
  properties: {
    displayName: 'Thematiq: function failure rate above ${failureRatePercent}%'
    description: 'More than ${failureRatePercent}% of function executions failed in 15 minutes.'
    severity: 2
    enabled: true
    scopes: [applicationInsightsId]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: 'requests | summarize total = count(), failed = countif(success == false) | where total >= 10 | extend rate = 100.0 * failed / total'
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'rate'
          operator: 'GreaterThan'
          threshold: failureRatePercent
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    autoMitigate: true
    actions: { actionGroups: actionGroups }
  }
}

// Platform-metric backstop that needs nothing from the app: any messages at all
// sitting in the account's queues for 30 minutes while the app reports no
// executions would show here first if telemetry itself is broken.
resource queueBacklogAlert 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: 'alert-${namePrefix}-queue-backlog'
  location: 'global'
  tags: tags
  properties: {
    description: 'Storage queue messages have stayed above 100 for 30 minutes (all queues of the account, including poison).'
    severity: 3
    enabled: true
    scopes: ['${storageAccountId}/queueServices/default']
    evaluationFrequency: 'PT15M'
    windowSize: 'PT1H'
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          name: 'QueueMessageCount'
          criterionType: 'StaticThresholdCriterion'
          metricNamespace: 'Microsoft.Storage/storageAccounts/queueServices'
          metricName: 'QueueMessageCount'
          operator: 'GreaterThan'
          threshold: 100
          timeAggregation: 'Average'
        }
      ]
    }
    autoMitigate: true
    actions: [for id in actionGroups: { actionGroupId: id }]
  }
}

