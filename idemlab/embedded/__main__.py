from idemlab.embedded.server import main

main()
