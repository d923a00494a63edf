// LocalStack 4.14.0 starts DynamoDB Local with -javaagent:ddb-local-loader-0.1.jar, an agent
// it downloads from GitHub whose only job is lifting DynamoDB Local's limit of 20 global
// secondary indexes per table (services/dynamodb/packages.py). The lab's tables have far
// fewer, and that host cannot be reached offline: this agent, built from this file at
// install, stands in its place and does nothing.
public final class DynamoDBLocalAgent {
    public static void premain(String arguments) {}
}
