package sqsenv

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
)

// bare clears the AWS configuration of the environment for one test.
func bare(t *testing.T) {
	for _, k := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/sqsenv-test/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/sqsenv-test/credentials")
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "localhost": true, "LocalHost": true,
		"10.0.0.1": false, "sqs.us-east-1.amazonaws.com": false, "localstack": false, "": false, "::": false,
	} {
		if got := isLoopback(host); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// Only a loopback AWS_ENDPOINT_URL_SQS with nothing configured gets the
// emulator's stand-ins; a remote one keeps the SDK's chain, which ends at
// EC2 instance metadata.
func TestEnvEndpointCredentials(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		endpoint, region string
		dummy            bool
		wantRegion       string
	}{
		{"http://127.0.0.1:4566", "", true, "us-east-1"},
		{"http://[::1]:4566/", "", true, "us-east-1"},
		{"http://localhost:4566", "ap-south-1", true, "ap-south-1"},
		{"http://sqs.internal.example:4566", "eu-west-1", false, "eu-west-1"},
	} {
		bare(t)
		t.Setenv("AWS_ENDPOINT_URL_SQS", tc.endpoint)
		t.Setenv("AWS_REGION", tc.region)
		env, err := Open(ctx, Flags{})
		if err != nil {
			t.Fatalf("%s: %v", tc.endpoint, err)
		}
		o := env.Client.Options()
		static := aws.IsCredentialsProvider(o.Credentials, credentials.StaticCredentialsProvider{})
		imds := aws.IsCredentialsProvider(o.Credentials, (*ec2rolecreds.Provider)(nil))
		if static != tc.dummy || imds == tc.dummy || o.Region != tc.wantRegion || env.Endpoint != tc.endpoint {
			t.Errorf("%s: static %v, imds %v, region %q, endpoint %q", tc.endpoint, static, imds, o.Region, env.Endpoint)
		}
	}

	// Configured credentials are kept on a loopback endpoint too.
	bare(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:4566")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSQSENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	env, err := Open(ctx, Flags{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.Client.Options().Credentials.Retrieve(ctx)
	if err != nil || c.AccessKeyID != "AKIDSQSENV" {
		t.Errorf("configured credentials replaced: %+v, %v", c, err)
	}
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	for name, f := range map[string]Flags{
		"no region for AWS": {AWS: true},
		"bad endpoint flag": {EndpointURL: "localhost:4566"},
		"no host":           {EndpointURL: "http://"},
		"missing profile":   {Profile: "sqsenv-no-such-profile"},
	} {
		bare(t)
		if _, err := Open(ctx, f); !errors.Is(err, ErrUsage) {
			t.Errorf("%s: %v, want ErrUsage", name, err)
		}
	}
	bare(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", "not a url")
	if _, err := Open(ctx, Flags{}); !errors.Is(err, ErrUsage) {
		t.Errorf("bad AWS_ENDPOINT_URL_SQS: %v, want ErrUsage", err)
	}
}
