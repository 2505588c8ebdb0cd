// Starts DynamoDB Local listening on one address only (default 127.0.0.1).
//
// DynamoDB Local's own ServerRunner has no option for the listen address and binds every
// interface. This launcher builds the server exactly as ServerRunner does (same command-line
// options: -inMemory, -port, -sharedDb, -disableTelemetry, ...), sets the host of its Jetty
// connectors, then starts it. Used by scripts/emulators.sh; compiled once into .tools/.
//
// Address: system property webhooks.ddb.host (default 127.0.0.1).

import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class DynamoDbLocalLoopback {
    public static void main(String[] args) throws Exception {
        String host = System.getProperty("webhooks.ddb.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server server = (Server) field.get(proxy);
        int bound = 0;
        for (Connector connector : server.getConnectors()) {
            if (connector instanceof ServerConnector) {
                ((ServerConnector) connector).setHost(host);
                bound++;
            }
        }
        if (bound == 0) {
            throw new IllegalStateException("DynamoDB Local has no ServerConnector to bind to " + host);
        }
        proxy.start();
        System.out.println("DynamoDB Local listening on " + host);
        proxy.join();
    }
}
