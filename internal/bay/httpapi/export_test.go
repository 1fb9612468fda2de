package httpapi

// ValidatePath is validatePath, for the tests of package httpapi_test.
var ValidatePath = validatePath

// WireDetails is wireDetails, for the tests of package httpapi_test.
var WireDetails = wireDetails
