package googleadk

// IsScenarioCase is for the root package's tests (its export_test.go),
// which own the Google fixtures. Nothing else calls it.
var IsScenarioCase = isScenarioCase
